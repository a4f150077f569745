"""What the PyTorch twins share: the one runner, the command line's pieces, the exit
codes, the clock, statistics, devices, the environment, precisions, memory checks, result
files, tables, and the tests' kit."""
