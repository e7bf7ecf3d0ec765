# P2P_CHECK_CUDA: optional CUDA runtime. --with-cuda=yes|no|guess|DIR,
# guess looks in /usr/local/cuda. Builds and runs without a GPU or driver.
AC_DEFUN([P2P_CHECK_CUDA], [
  AC_ARG_WITH([cuda],
    [AS_HELP_STRING([--with-cuda=yes|no|guess|DIR], [CUDA runtime (default: guess /usr/local/cuda)])],
    [], [with_cuda=guess])
  p2p_have_cuda=no
  CUDA_HOME=""
  AS_IF([test "x$with_cuda" != xno], [
    AS_CASE([$with_cuda], [yes|guess], [CUDA_HOME=/usr/local/cuda], [CUDA_HOME=$with_cuda])
    p2p_save_CPPFLAGS="$CPPFLAGS"; p2p_save_LDFLAGS="$LDFLAGS"; p2p_save_LIBS="$LIBS"
    CUDA_CFLAGS="-I$CUDA_HOME/include"
    CUDA_LIBS="-L$CUDA_HOME/lib64 -Wl,-rpath,$CUDA_HOME/lib64 -lcudart"
    CPPFLAGS="$CPPFLAGS $CUDA_CFLAGS"; LIBS="$LIBS $CUDA_LIBS"
    AC_CHECK_HEADER([cuda_runtime_api.h],
      [AC_LINK_IFELSE([AC_LANG_PROGRAM([[#include <cuda_runtime_api.h>]],
                                       [[int n = 0; cudaGetDeviceCount(&n);]])],
                      [p2p_have_cuda=yes])])
    CPPFLAGS="$p2p_save_CPPFLAGS"; LDFLAGS="$p2p_save_LDFLAGS"; LIBS="$p2p_save_LIBS"
    AS_IF([test "x$p2p_have_cuda" = xno && test "x$with_cuda" != xguess],
          [AC_MSG_ERROR([CUDA runtime requested but not found in $CUDA_HOME])])
    AS_IF([test "x$p2p_have_cuda" = xno],
          [AC_MSG_WARN([CUDA runtime not found in $CUDA_HOME: host memory only]); CUDA_HOME=""])
  ])
  AS_IF([test "x$p2p_have_cuda" = xno], [CUDA_CFLAGS=""; CUDA_LIBS=""])
  AS_IF([test "x$p2p_have_cuda" = xyes], [AC_DEFINE([HAVE_CUDA], [1], [CUDA runtime available])])
  AM_CONDITIONAL([HAVE_CUDA], [test "x$p2p_have_cuda" = xyes])
  AC_SUBST([CUDA_CFLAGS])
  AC_SUBST([CUDA_LIBS])
  AC_SUBST([CUDA_HOME])
])
