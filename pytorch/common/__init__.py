"""What the PyTorch twins share: the command line's pieces and exit codes, the clock,
statistics, devices, the environment, precisions, memory checks, result files, tables,
and the tests' kit."""
