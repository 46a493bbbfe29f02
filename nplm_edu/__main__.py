import sys

try:
    from .cli import main
except KeyboardInterrupt:  # Ctrl-C while the package is still importing: no traceback, as later
    print("interrupted", file=sys.stderr)
    sys.exit(130)

sys.exit(main())
