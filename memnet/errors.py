"""The one exception type the command line turns into a clear message and a non-zero exit."""


class MemnetError(Exception):
    """A user-facing error: bad input, a missing file, a bad config. Never shown as a traceback."""


def interrupted(error: BaseException) -> bool:
    """Whether `error` is Ctrl-C: a KeyboardInterrupt, or an error raised because of one. A
    Ctrl-C that lands inside a compiled Numba function comes out as SystemError ('returned a
    result with an exception set'), the KeyboardInterrupt its cause."""
    seen = set()
    while error is not None and id(error) not in seen:
        if isinstance(error, KeyboardInterrupt):
            return True
        seen.add(id(error))
        error = error.__cause__ or error.__context__
    return False
