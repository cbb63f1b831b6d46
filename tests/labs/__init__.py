"""What tests share: the labs they run against (real sshd, a real Slurm cluster), the release
and workspace files they start from, and the golden-file check."""
