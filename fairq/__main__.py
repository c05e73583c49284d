"""``python -m fairq``: the same as the ``fairq`` command."""

from fairq.cli import main

main()
