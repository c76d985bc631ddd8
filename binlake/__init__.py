"""binlake: shared pipeline code (config, object storage, Spark session, table registry, CLI).

Submodules are imported explicitly (``from binlake.config import load_config``); importing the
package itself has no side effects and starts nothing.
"""

__version__ = "0.1.0"
