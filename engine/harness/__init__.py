"""The in-image harness: standard-library-only code that runs inside the sandbox image.

The image build copies this package to ``/opt/airlock/harness``. The host imports only
``protocol`` and ``codec`` from it, so both sides share one definition of the wire format.
"""
