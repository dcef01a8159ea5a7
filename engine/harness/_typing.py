"""``typing.TYPE_CHECKING`` without importing ``typing``.

The harness starts once per submission, and importing ``typing`` alone costs it a few
milliseconds. Type checkers take any name ``TYPE_CHECKING`` in an ``if`` as true.
"""

TYPE_CHECKING = False
