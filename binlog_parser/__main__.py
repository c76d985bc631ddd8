"""``python -m binlog_parser FILE...`` (see ``binlog_parser.cli``)."""

import sys

from binlog_parser.cli import main

if __name__ == "__main__":
    sys.exit(main())
