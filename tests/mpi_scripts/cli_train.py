"""`python -m nplm_edu train ...` with train.PARALLEL's section-3 entries registered here, for as long
as nplm_edu/train.py does not register them itself (then tests call `-m nplm_edu` directly)."""
import sys

from nplm_edu import train
from nplm_edu.cli import main
from nplm_edu.parallel import run_hogwild, run_output_block

train.PARALLEL.setdefault("output-block", run_output_block)
train.PARALLEL.setdefault("hogwild", run_hogwild)
sys.exit(main(sys.argv[1:]))
