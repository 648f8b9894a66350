"""NOT torchvision.transforms: wai-dispatch's empty shim of it (see ``torchvision``).

CompressAI 1.2.8 copies this module's capitalised names into its transform registry; there are
none. Any transform asked for (``transforms.ToTensor``) raises an ``ImportError`` naming the shim.
"""

from torchvision import module_getattr

__getattr__ = module_getattr(__name__)
