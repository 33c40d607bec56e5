"""Where search runs: the local store and index (default) or a Milvus collection.

``backend: local`` (or no setting) keeps everything in the KB folder.
``backend: {kind: milvus, uri, token, collection, db}`` mirrors the store into
Milvus (see :mod:`clawkb.backends.milvus_sync`) and answers searches from it
(:mod:`clawkb.backends.milvus_search`). ``uri`` is ``http://host:19530``
(standalone, cluster, Zilliz Cloud) or a file path (Milvus Lite, embedded).
A folder holding only ``remote.yaml`` is a remote-only KB
(:mod:`clawkb.backends.remote`): no local store, every read goes to Milvus.
"""

from clawkb.backends.settings import MilvusSettings, backend_settings

__all__ = ["MilvusSettings", "backend_settings"]
