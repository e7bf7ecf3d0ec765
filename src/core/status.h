#ifndef UCXP2P_CORE_STATUS_H
#define UCXP2P_CORE_STATUS_H

#include "ucxp2p_config.h"  // autoconf: PACKAGE_VERSION

#include <ucp/api/ucp.h>
#include <ucxp2p/p2p.h>

namespace ucxp2p {

/** Map a UCS status to the public status (endpoint failures -> peer failure). */
p2p_status_t status_from_ucs(ucs_status_t st);

} // namespace ucxp2p

#endif
