"""Whether a process's log holds a sanitizer's report (ASan, LSan, TSan, UBSan), in any build:
the end-to-end tests read quadsockd's log with it when they stop it.

    report = sanitizer_report.first_line(log_text)   # None, or the report's first line
"""

# What each sanitizer writes when it finds something.
MARKS = ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "WARNING: ThreadSanitizer",
         "runtime error:")


def first_line(log):
    """The first line of a sanitizer's report in `log`, or None."""
    for line in log.splitlines():
        if any(mark in line for mark in MARKS):
            return line
    return None
