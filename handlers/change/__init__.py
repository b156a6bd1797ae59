"""Settings changes from a channel (issue 25): ``set … on kimi``, ``revert kimi``, and the terminal's
``inferbot change`` / ``inferbot revert``. A change is one more kind of confirmable request (``kind.py``), whose
own state machine (``machine.py``) lives in the store and is driven by the scheduler's settle job."""
