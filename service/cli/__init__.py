"""The `sluice` command line (typer + rich): commands, the HTTP client, and `sluice process`."""
