# tests/browser holds the headless-Chromium check of the built book (check_book.py): a script run by
# `make browser-check`, not a test module. Keep pytest out of this folder.
collect_ignore_glob = ["*.py"]
