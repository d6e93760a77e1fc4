"""Exercise checkers, one module per chapter. Each ``check_*`` prints a one-line Chinese verdict."""
from . import ch03

__all__ = ["ch03"]
