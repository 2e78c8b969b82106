"""The fault campaign behind ``sgm chaos`` (docs/RELIABILITY.md).

``campaign``   set-up, the seeded fault schedule, kills and freezes, waiting for every process to catch up
``processes``  the supervised ``sgm serve`` processes: start, kill, restart, their logs and metrics
``topics``     the stream fed to the processes (with malformed and hostile records) and the tail of the results
``audit``      the reference replay (the service's own training dispatch) and every check of the result
"""
from .audit import compare_models, replay
from .campaign import CampaignConfig, run_campaign
from .processes import die_with_parent

__all__ = ["CampaignConfig", "compare_models", "die_with_parent", "replay", "run_campaign"]
