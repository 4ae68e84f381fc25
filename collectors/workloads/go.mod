module gmpscope/workloads

go 1.19
