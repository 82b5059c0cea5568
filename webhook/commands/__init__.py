"""Subcommands of the gpu-webhook CLI, one module each; cli.py registers them."""
