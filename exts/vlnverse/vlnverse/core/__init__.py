"""Layer-independent building blocks: errors, atomic I/O, registries, configs, seeding."""
from .errors import ConfigError, NoNavigableSpaceError, SceneError, UnknownNameError, VLNVerseError
from .io import (atomic_dir, atomic_path, claim_output_dir, folder_lock, replace_output_dir, write_bytes_atomic,
                 write_json_atomic, write_jsonl_atomic, write_npz, write_text_atomic)
from .registry import Registry

__all__ = ["ConfigError", "NoNavigableSpaceError", "SceneError", "UnknownNameError", "VLNVerseError",
           "atomic_dir", "atomic_path", "claim_output_dir", "folder_lock", "replace_output_dir", "write_bytes_atomic",
           "write_json_atomic", "write_jsonl_atomic", "write_npz", "write_text_atomic",
           "Registry"]
