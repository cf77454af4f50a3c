#!/bin/sh
echo "coverage is not available in quadsock's offline build (remote_coverage_tools is a stub)" >&2
exit 1
