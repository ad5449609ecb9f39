"""The one exception type the command line turns into a clear message and a non-zero exit."""


class MemnetError(Exception):
    """A user-facing error: bad input, a missing file, a bad config. Never shown as a traceback."""
