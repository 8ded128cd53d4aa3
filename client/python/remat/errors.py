"""The one exception type remat raises for a failed call into its core."""


class Error(RuntimeError):
    """A call into remat's core failed.

    Attributes:
        code: the status code's name, e.g. ``"INVALID_ARGUMENT"``,
            ``"UNAVAILABLE"``, ``"NOT_FOUND"``, ``"RESOURCE_EXHAUSTED"``.
        message: what failed and, for a bad argument, the field and the fix.
    """

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
