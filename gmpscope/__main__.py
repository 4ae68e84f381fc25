from gmpscope.cli import entry

entry()
