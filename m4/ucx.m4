# P2P_CHECK_UCX: UCX's ucp through pkg-config. Required.
AC_DEFUN([P2P_CHECK_UCX], [
  AC_ARG_WITH([ucx],
    [AS_HELP_STRING([--with-ucx=yes|DIR], [UCX install prefix (default: pkg-config ucx)])],
    [], [with_ucx=yes])
  AS_IF([test "x$with_ucx" = xno], [AC_MSG_ERROR([UCX is required; --without-ucx is not supported])])
  AS_IF([test "x$with_ucx" != xyes && test "x$with_ucx" != xguess],
        [export PKG_CONFIG_PATH="$with_ucx/lib/pkgconfig:$with_ucx/lib64/pkgconfig:$PKG_CONFIG_PATH"])
  PKG_CHECK_MODULES([UCX], [ucx >= 1.12], [],
    [AC_MSG_ERROR([UCX >= 1.12 (ucp) not found: install libucx-dev or pass --with-ucx=DIR])])
  UCX_VERSION=`$PKG_CONFIG --modversion ucx`
  p2p_save_CPPFLAGS="$CPPFLAGS"; p2p_save_LIBS="$LIBS"
  CPPFLAGS="$CPPFLAGS $UCX_CFLAGS"; LIBS="$LIBS $UCX_LIBS -lucp -lucs"
  AC_CHECK_HEADER([ucp/api/ucp.h], [], [AC_MSG_ERROR([ucp/api/ucp.h not found])])
  AC_LINK_IFELSE([AC_LANG_PROGRAM([[#include <ucp/api/ucp.h>]], [[ucp_get_version_string();]])],
    [], [AC_MSG_ERROR([cannot link with libucp])])
  CPPFLAGS="$p2p_save_CPPFLAGS"; LIBS="$p2p_save_LIBS"
  UCX_LIBS="$UCX_LIBS -lucp -lucs"
  p2p_have_ucx=yes
  AC_SUBST([UCX_VERSION])
])
