"""blockscope's exceptions: one class per kind of failure, each with blockscope's own message.

The C++ core raises these by name (python/module.cpp); every one is a ``blockscope.Error``.
"""


class Error(Exception):
    """Any failure blockscope reports."""


class ConfigError(Error, ValueError):
    """A config that does not read or validate: the message names the file, line and key."""


class InputError(Error, ValueError):
    """A bad argument: an array's type, shape, strides or device, a path name, an option."""


class DeviceError(InputError):
    """A device that is not in this build or not on this machine (``device='cuda'`` without a GPU)."""


class FileError(Error, OSError):
    """A file blockscope was asked to read or write and could not."""


class RuntimeFailure(Error, RuntimeError):
    """A failure while running (out of memory, a CUDA error): not the caller's input."""


class BlockscopeWarning(UserWarning):
    """A note or warning blockscope printed (a key without effect, a profile measured elsewhere)."""
