"""Sub-commands of the ``sgm`` CLI, one per module."""
