/*
 * core/vm_range: the /proc/self/maps reading behind p2p_mem_register's
 * check, on maps files written by the test (holes, permissions, the file
 * missing or malformed) and on this process' own.
 */
#include "core/vm_range.h"

#include <gtest/gtest.h>

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <string>

using ucxp2p::vm::Access;
using ucxp2p::vm::range_access;

namespace {

class MapsFile {
public:
    explicit MapsFile(const std::string &text) {
        char tmpl[] = "/tmp/p2p_maps_XXXXXX";
        int fd = mkstemp(tmpl);
        path_ = tmpl;
        if (fd >= 0) {
            ssize_t w = write(fd, text.data(), text.size());
            (void)w;
            close(fd);
        }
    }
    ~MapsFile() { unlink(path_.c_str()); }
    const char *path() const { return path_.c_str(); }

private:
    std::string path_;
};

const void *at(uintptr_t a) { return reinterpret_cast<const void *>(a); }

const char *const kMaps =
    "00400000-00401000 r-xp 00000000 08:01 123 /bin/x\n"
    "00401000-00403000 rw-p 00000000 00:00 0\n"
    "00403000-00404000 r--p 00000000 00:00 0 [a name with spaces]\n"
    "00404000-00405000 ---p 00000000 00:00 0\n"
    "00406000-00408000 -w-p 00000000 00:00 0\n"
    "7ffd00000000-7ffd00001000 rw-p 00000000 00:00 0 [stack]";  // no final newline

} // namespace

TEST(VmRange, AccessOverOneOrSeveralMappings) {
    MapsFile f(kMaps);
    EXPECT_EQ(Access::READ_WRITE, range_access(at(0x401000), 0x2000, f.path()));
    EXPECT_EQ(Access::READ_WRITE, range_access(at(0x401fff), 2, f.path()));
    EXPECT_EQ(Access::READ_ONLY, range_access(at(0x400010), 16, f.path()));
    EXPECT_EQ(Access::READ_ONLY, range_access(at(0x400000), 0x4000, f.path()));
    EXPECT_EQ(Access::READ_ONLY, range_access(at(0x402ff0), 0x20, f.path()));
    EXPECT_EQ(Access::NO_ACCESS, range_access(at(0x403000), 0x1001, f.path()));
    EXPECT_EQ(Access::READ_WRITE, range_access(at(0x406000), 0x2000, f.path()))
        << "write without read reads too";
    EXPECT_EQ(Access::READ_WRITE, range_access(at(0x7ffd00000800), 0x800, f.path()))
        << "last line without a newline";
}

TEST(VmRange, HolesAreUnmapped) {
    MapsFile f(kMaps);
    EXPECT_EQ(Access::UNMAPPED, range_access(at(0x3ff000), 0x10, f.path())) << "before all";
    EXPECT_EQ(Access::UNMAPPED, range_access(at(0x3fffff), 2, f.path())) << "into the first";
    EXPECT_EQ(Access::UNMAPPED, range_access(at(0x405000), 1, f.path())) << "in a hole";
    EXPECT_EQ(Access::UNMAPPED, range_access(at(0x404ff0), 0x20, f.path())) << "into a hole";
    EXPECT_EQ(Access::UNMAPPED, range_access(at(0x401000), 0x8000, f.path())) << "across one";
    EXPECT_EQ(Access::UNMAPPED, range_access(at(0x7ffd00000000), 0x1001, f.path()))
        << "past the last";
}

TEST(VmRange, UnreadableOrMalformedMapsAreNotChecked) {
    EXPECT_EQ(Access::UNKNOWN, range_access(at(0x401000), 16, "/nonexistent/maps"));
    MapsFile bad("00400000-00401000 rw-p 0 0 0\nnot a maps line\n");
    EXPECT_EQ(Access::UNKNOWN, range_access(at(0x7f0000000000), 16, bad.path()));
    EXPECT_EQ(Access::READ_WRITE, range_access(at(0x400000), 16, bad.path()))
        << "answered before the bad line";
    MapsFile truncated("00400000-00401000");
    EXPECT_EQ(Access::UNKNOWN, range_access(at(0x400000), 16, truncated.path()));
}

TEST(VmRange, ThisProcessMappings) {
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    void *p = mmap(nullptr, 3 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                   -1, 0);
    ASSERT_NE(MAP_FAILED, p);
    uint8_t *b = static_cast<uint8_t *>(p);
    EXPECT_EQ(Access::READ_WRITE, range_access(b, 3 * page));
    ASSERT_EQ(0, mprotect(b + page, page, PROT_READ));
    EXPECT_EQ(Access::READ_ONLY, range_access(b, 3 * page));
    EXPECT_EQ(Access::READ_WRITE, range_access(b + 2 * page, page));
    ASSERT_EQ(0, mprotect(b + page, page, PROT_NONE));
    EXPECT_EQ(Access::NO_ACCESS, range_access(b + page - 1, 2));
    ASSERT_EQ(0, munmap(b + page, page));
    EXPECT_EQ(Access::UNMAPPED, range_access(b, 3 * page));
    EXPECT_EQ(Access::READ_WRITE, range_access(b + 2 * page, 1));
    munmap(b, page);
    munmap(b + 2 * page, page);
    static const char kConst[] = "text";  // in a read-only section
    EXPECT_EQ(Access::READ_ONLY, range_access(kConst, sizeof(kConst)));
}
