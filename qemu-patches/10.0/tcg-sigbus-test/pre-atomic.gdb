break atomic_mmu_lookup
continue
delete
finish
printf "after atomic_mmu_lookup: pc %#lx, tcg_ram_access_ra %#lx\n", $pc, tcg_ram_access_ra
source tgkill.gdb
continue
