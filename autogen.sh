#!/bin/sh
# Generate configure and Makefile.in from configure.ac and Makefile.am.
set -e
cd "$(dirname "$0")"
autoreconf --install --force --warnings=all
