// The one place a rank picks its GPU and CUDA errors become exceptions: the CUDA backend and
// the NCCL communicator both go through it. Only built with PTSUITE_CUDA.
#pragma once
#include <cuda_runtime_api.h>

#include <string>

namespace pts {

// Throws Error "CUDA: <what>: <cudaGetErrorString>" when `status` is not cudaSuccess.
void cuda_check(cudaError_t status, const char* what);
#define PTS_CUDA_CHECK(call) ::pts::cuda_check((call), #call)

// The number of GPUs this process sees (CUDA_VISIBLE_DEVICES respected); 0 without a driver
// or a GPU (never throws).
int cuda_device_count();

// One rank per GPU: local rank (Open MPI's OMPI_COMM_WORLD_LOCAL_RANK, Slurm's SLURM_LOCALID,
// else 0) modulo the visible GPUs; sets it current on the calling thread and returns it.
// Throws Error when no GPU is visible.
int select_cuda_device();

// The rank's compute stream (on the selected device; created on first use): every
// backend op runs on it, and a collective orders itself after the work queued on it.
cudaStream_t compute_stream();

// "PCI 0000:3b:00.0 on host H": what identifies the GPU this rank uses across the job, so ranks
// can tell whether they share one.
std::string cuda_device_identity(int device);

// "NVIDIA H200 (sm_90, 139.8 GiB)": for env.json and `ptsuite list`.
std::string cuda_device_name(int device);

}  // namespace pts
