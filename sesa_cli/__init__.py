"""The `sesa` command line: the top layer, one module per command group; nothing below imports typer."""
