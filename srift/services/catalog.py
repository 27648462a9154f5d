"""The catalog as an application service: instance types and prices for the REST API and the dashboard.

Listing is the catalog front layer's own `list_instance_types` (srift.catalog.store, documented there):
it takes and returns domain values already, so this module names it rather than wrapping it.
"""

from srift.catalog.store import CatalogEntry as CatalogEntry
from srift.catalog.store import list_instance_types as list_instance_types
