"""What no researcher changes: atomic writes, file refusals, signals, threads and precision, the scripts' command
line and life cycle, yaml hardening, errors. The algorithm's files at the top use it and never the reverse."""
