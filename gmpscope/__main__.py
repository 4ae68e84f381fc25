import sys

from gmpscope.cli import main

sys.exit(main())
