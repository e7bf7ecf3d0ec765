/* UCX_TLS as UCX reads it: lists, aliases, exclusions, ":aux" names. */
#include "core/ucx_tls.h"

#include <gtest/gtest.h>

using ucxp2p::UcxTls;

TEST(UcxTls, UnsetOrEmptyAllowsEverything) {
    for (const char *v : {static_cast<const char *>(nullptr), ""}) {
        UcxTls t(v);
        EXPECT_TRUE(t.allows("tcp"));
        EXPECT_TRUE(t.allows("cma"));
        EXPECT_TRUE(t.allows_shm_am());
    }
    EXPECT_TRUE(UcxTls("all").allows("posix"));
    EXPECT_TRUE(UcxTls("tcp,all").allows("sysv"));
}

TEST(UcxTls, ListAllowsOnlyWhatItNames) {
    UcxTls t("tcp,self");
    EXPECT_TRUE(t.allows("tcp"));
    EXPECT_TRUE(t.allows("self"));
    EXPECT_FALSE(t.allows("cma"));
    EXPECT_FALSE(t.allows("posix"));
    EXPECT_FALSE(t.allows_shm_am());
    // cma and knem copy but carry no active messages.
    EXPECT_FALSE(UcxTls("tcp,cma,knem").allows_shm_am());
    EXPECT_TRUE(UcxTls("tcp,cma").allows("cma"));
}

TEST(UcxTls, AliasesExpandAsInUcx) {
    UcxTls sm("sm,self");
    UcxTls shm("shm");
    UcxTls mm("mm");
    for (const char *tl : {"posix", "sysv", "xpmem", "knem", "cma"}) {
        EXPECT_TRUE(sm.allows(tl)) << tl;
        EXPECT_TRUE(shm.allows(tl)) << tl;
    }
    EXPECT_TRUE(mm.allows("posix"));
    EXPECT_TRUE(mm.allows("xpmem"));
    EXPECT_FALSE(mm.allows("cma"));
    EXPECT_TRUE(mm.allows_shm_am());
    EXPECT_TRUE(UcxTls("tcp,sysv").allows_shm_am());
    EXPECT_TRUE(UcxTls("xpmem").allows_shm_am());
}

TEST(UcxTls, ExclusionListAllowsTheRest) {
    UcxTls no_shm("^sm");
    EXPECT_TRUE(no_shm.allows("tcp"));
    EXPECT_FALSE(no_shm.allows("cma"));
    EXPECT_FALSE(no_shm.allows_shm_am());
    UcxTls no_posix("^posix,cma");
    EXPECT_FALSE(no_posix.allows("posix"));
    EXPECT_FALSE(no_posix.allows("cma"));
    EXPECT_TRUE(no_posix.allows("sysv"));
    EXPECT_TRUE(no_posix.allows_shm_am());
    EXPECT_TRUE(UcxTls("^tcp").allows_shm_am());
    EXPECT_FALSE(UcxTls("^posix,sysv,xpmem").allows_shm_am());
}

TEST(UcxTls, AuxSuffixAndEmptyItemsAreTolerated) {
    UcxTls t("rc_verbs,ud_verbs:aux,,tcp");
    EXPECT_TRUE(t.allows("ud_verbs"));
    EXPECT_TRUE(t.allows("rc_verbs"));
    EXPECT_TRUE(t.allows("tcp"));
    EXPECT_FALSE(t.allows(""));
    EXPECT_FALSE(t.allows_shm_am());
}

TEST(UcxTls, RdmaTransportsAndTheirAliases) {
    EXPECT_TRUE(UcxTls(nullptr).allows_rdma());
    EXPECT_TRUE(UcxTls("rc,sm,self").allows_rdma());
    EXPECT_TRUE(UcxTls("ib").allows("dc_mlx5"));
    EXPECT_TRUE(UcxTls("rc_x").allows("ud_mlx5"));   // its aux transport
    EXPECT_FALSE(UcxTls("rc_x").allows("rc_verbs"));
    EXPECT_TRUE(UcxTls("ud_v,tcp").allows_rdma());
    EXPECT_TRUE(UcxTls("srd,self").allows_rdma());    // EFA (UCX >= 1.19)
    EXPECT_TRUE(UcxTls("^tcp").allows_rdma());
    EXPECT_FALSE(UcxTls("tcp,sm,self").allows_rdma());
    EXPECT_FALSE(UcxTls("tcp").allows_rdma());
    EXPECT_FALSE(UcxTls("^ib,srd").allows_rdma());
}

// What a context in a child forked while UCX's async thread ran may use
// (core/fork_ucx.h): named transports, aliases expanded, all within the
// list; "all", unset and "^..." leave the choice to UCX, so never.
TEST(UcxTls, AllowsOnlyAListedSet) {
    const auto shm = {"posix", "sysv", "xpmem", "knem", "cma", "self"};
    EXPECT_TRUE(UcxTls("shm,self").allows_only(shm));
    EXPECT_TRUE(UcxTls("sm,self").allows_only(shm));
    EXPECT_TRUE(UcxTls("posix:aux,cma").allows_only(shm));
    EXPECT_TRUE(UcxTls("self").allows_only(shm));
    EXPECT_FALSE(UcxTls("shm,self,tcp").allows_only(shm));
    EXPECT_FALSE(UcxTls("tcp").allows_only(shm));
    EXPECT_FALSE(UcxTls("rc,self").allows_only(shm));
    EXPECT_FALSE(UcxTls("all").allows_only(shm));
    EXPECT_FALSE(UcxTls(nullptr).allows_only(shm));
    EXPECT_FALSE(UcxTls("^tcp").allows_only(shm));
    EXPECT_FALSE(UcxTls("mm").allows_only({"posix", "sysv"}));  // xpmem too
}
