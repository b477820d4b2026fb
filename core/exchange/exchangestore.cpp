#include "exchange/exchangestore.h"

namespace tollgate {

bool ExchangeStore::isStoreFailure(const Error& error)
{
    return error.kind != ErrorKind::Timeout && error.kind != ErrorKind::Usage
        && error.kind != ErrorKind::Busy;
}

} // namespace tollgate
