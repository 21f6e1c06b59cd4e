"""The one exception type for bad user input. The CLI prints its message as a single line and exits 2."""


class TwinInputError(ValueError):
    """Bad input: the message names the field (or file and line), the value, and what is allowed."""
