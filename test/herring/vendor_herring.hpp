/*
 * The test's own copy of the vendor declarations (SMDDP herring.hpp, P2P part
 * only), written from the vendor's developer guide -- deliberately NOT our
 * plugins/herring/herring.hpp, so the tests prove binary compatibility with
 * code built against the vendor header.
 */
#ifndef TEST_VENDOR_HERRING_HPP
#define TEST_VENDOR_HERRING_HPP

#include <cstdint>
#include <string>
#include <vector>

// The status of P2P Send/Recv
typedef enum {
  RDMA_READ_SUCCESS = 0,
  RDMA_READ_FAIL,
  RDMA_READ_STATUS_UNKOWN,
  RDMA_SHUTDOWN,
} herringP2PMessageErrorCode_t;

struct CompletionEntry {
  const void *context;
  uint32_t dst_rank;
  uint32_t tensor_id;
  herringP2PMessageErrorCode_t error_code;
};

typedef CompletionEntry* CompletionEntryPtr;

void* herringP2PRegisterMemory(void* buff, int buff_len);
CompletionEntry herringP2PReadCompletion();
CompletionEntry herringP2PSendCompletion();
void herringP2PSend(int rank, const void* buffer, void* mr, uint64_t length,
          int tensor_id, const void* context, uint32_t imm_data);
void herringP2PRecv(int rank, void* buffer, void* mr, uint64_t length, int tensor_id,
          const void* context, uint32_t imm_data);
void herringP2PGetRDMADevices(std::vector<std::string>&);
void herringP2PInitialize();
void herringP2PShutdown();
int herringLocalDevice();

#endif
