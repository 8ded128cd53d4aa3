"""The exceptions remat raises: Error for a failed call into its core,
BudgetError (an Error) when no plan fits a batch under its budget."""


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


class BudgetError(Error):
    """No plan fits the batch under the budget: the step did not run.

    Split the batch into micro-batches (``handle.fit_batch`` says how
    many), raise the budget, or let such steps run over budget
    (``over_budget="run"``).

    Attributes:
        smallest_peak_bytes: the least peak any plan reaches for the batch.
    """

    def __init__(self, message: str, smallest_peak_bytes: int) -> None:
        super().__init__("RESOURCE_EXHAUSTED", message)
        self.smallest_peak_bytes = smallest_peak_bytes
