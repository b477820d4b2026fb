"""The C library (libtollgate.so) through ctypes: loading it and declaring its functions.

Every function is declared with its argument and result types, so that ctypes converts (and
refuses) arguments itself; the package checks types and ranges before it calls, so that a wrong
value from Python is a TypeError or ValueError, never a crash or a silent truncation.
"""

import ctypes
import ctypes.util
import os

OK = 0
E_USAGE = 1
E_NOT_FOUND = 2
E_PERMISSION = 3
E_IO = 4
E_CORRUPT = 5
E_BUSY = 6
E_TIMEOUT = 7
E_UNSUPPORTED = 8
E_REFUSED = 9
E_CANCELLED = 10
E_STATE = 11
E_CLOSED = 12
E_FORKED = 13
E_INTERNAL = 14

SLOT = 1

INT64_MAX = 2**63 - 1


class ErrorStruct(ctypes.Structure):
    _fields_ = [
        ("code", ctypes.c_int),
        ("sys_errno", ctypes.c_int),
        ("retry_after_ms", ctypes.c_int64),
        ("message", ctypes.c_char * 1024),
    ]


def _load():
    explicit = os.environ.get("TOLLGATE_LIBRARY")
    candidates = [explicit] if explicit else []
    found = ctypes.util.find_library("tollgate")
    if found:
        candidates.append(found)
    candidates.append("libtollgate.so.0")
    errors = []
    for name in candidates:
        try:
            return ctypes.CDLL(name)
        except OSError as e:
            errors.append(str(e))
    raise ImportError(
        "tollgate: cannot load libtollgate.so (install it with `cmake --install build`, or name the file "
        "with TOLLGATE_LIBRARY): " + "; ".join(errors))


lib = _load()

_home_p = ctypes.c_void_p
_call_p = ctypes.c_void_p
_err_p = ctypes.POINTER(ErrorStruct)


def _declare(name, restype, *argtypes):
    f = getattr(lib, name)
    f.restype = restype
    f.argtypes = list(argtypes)


_declare("tollgate_version", ctypes.c_char_p)
_declare("tollgate_status_name", ctypes.c_char_p, ctypes.c_int)
_declare("tollgate_home_open", ctypes.c_int, ctypes.c_char_p, ctypes.POINTER(_home_p), _err_p)
_declare("tollgate_home_close", None, _home_p)
_declare("tollgate_home_text", ctypes.c_char_p, _home_p)
_declare("tollgate_status_json", ctypes.c_int, _home_p, ctypes.POINTER(ctypes.c_void_p), _err_p)
_declare("tollgate_string_free", None, ctypes.c_void_p)
_declare("tollgate_call_new", ctypes.c_int, _home_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p,
         ctypes.c_int64, ctypes.c_int64, ctypes.c_int, ctypes.POINTER(_call_p), _err_p)
_declare("tollgate_call_new_http", ctypes.c_int, _home_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p,
         ctypes.c_size_t, ctypes.POINTER(_call_p), _err_p)
_declare("tollgate_call_admit", ctypes.c_int, _call_p, ctypes.c_int64, _err_p)
_declare("tollgate_call_cancel", None, _call_p)
_declare("tollgate_call_settle", ctypes.c_int, _call_p, ctypes.c_int64, ctypes.c_int64, _err_p)
_declare("tollgate_call_report_429", ctypes.c_int, _call_p, ctypes.c_int64, _err_p)
_declare("tollgate_call_release", ctypes.c_int, _call_p, _err_p)
_declare("tollgate_call_headers", ctypes.c_int, _call_p, ctypes.c_int, ctypes.POINTER(ctypes.c_char_p),
         ctypes.POINTER(ctypes.c_char_p), ctypes.c_size_t, _err_p)
_declare("tollgate_call_body", ctypes.c_int, _call_p, ctypes.c_char_p, ctypes.c_size_t, _err_p)
_declare("tollgate_call_finish", ctypes.c_int, _call_p, ctypes.c_int, _err_p)
_declare("tollgate_call_fence", ctypes.c_uint64, _call_p)
_declare("tollgate_call_holds_slot", ctypes.c_int, _call_p)
_declare("tollgate_call_waited_ms", ctypes.c_int64, _call_p)
_declare("tollgate_call_tokens", ctypes.c_int64, _call_p)
_declare("tollgate_call_free", None, _call_p)
