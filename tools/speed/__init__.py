"""The speed measurements behind the program's speed choices; each writes results/speed/<name>.md and .json."""
