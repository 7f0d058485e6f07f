// How many CPUs this process may run on: its affinity mask (which
// containers narrow), else the online count. Runners split them over ranks.
#pragma once

namespace cohort {

int usable_cpus();

}  // namespace cohort
