"""The command line: ``python app.py`` serves the page; the words below name its other commands.

The table is the one list of commands: ``app.py`` dispatches by it (each is the module of that
name here, with a ``main(argv)``), and the page's ``--help`` lists it. It imports nothing, so a
command's name is read before vLLM is.
"""

COMMANDS = {
    "batch": "sample a file of prompts, no browser",
    "sweep": "one setting over several values, same seeds",
    "analyze": "what the n samples of saved runs say (no engine)",
    "qa": "check the output_kind rules, as a table",
}


def module(name: str) -> str:
    """The module whose ``main(argv)`` runs the command ``name``."""
    return f"{__name__}.{name}"


def listing() -> str:
    """The commands as ``--help`` lists them, one per line."""
    return "\n".join(f"  {name:<9} {summary}" for name, summary in COMMANDS.items())
