# Message rate against thread pairs T, one line per configuration, for one
# host.  bench/plot.sh writes the data file and calls
#     gnuplot -e "host='openmpi'; datafile='...'; outfile='...'; cores=2" plot.gnuplot
# Data file: a header line "T raw global-spin ... everywhere", then one row
# per T with the median M msg/s of each configuration (NaN = no result).
if (!exists("host"))     host = "openmpi"
if (!exists("datafile")) datafile = "results/multirate-".host.".dat"
if (!exists("outfile"))  outfile = "results/multirate-".host.".png"
if (!exists("cores"))    cores = 2
if (!exists("tmax"))     tmax = 8

set terminal pngcairo size 960,640 noenhanced font ",11"
set output outfile
set datafile missing "NaN"
set title sprintf("Multirate pairwise, %s: median message rate vs thread pairs (%d cores; 2T busy entities)", host, cores)
set xlabel "pairs T (threads per rank; ranks/2 for MPI everywhere)"
set ylabel "M msg/s (all pairs, log scale)"
set logscale x 2
set xrange [0.8:tmax * 1.25]
set logscale y 10
set xtics (1, 2, 4, 8, 16, 32, 64)
set grid xtics ytics mytics
set key outside right top vertical
set style data linespoints
# The region where 2T entities exceed the cores.
set arrow 1 from cores/2.0, graph 0 to cores/2.0, graph 1 nohead dashtype 3 lc rgb "gray40"
set label 1 "oversubscribed ->" at cores/2.0, graph 0.04 offset 0.5,0 tc rgb "gray40"

# One line per configuration in cols (the data file's columns 2.., in order):
# the raw host and MPI everywhere thick, the progress policies by colour, the
# wait policies by dash.
if (!exists("cols")) cols = "raw global-spin global-block global-adaptive vci-spin vci-block vci-adaptive everywhere"
pol(c) = (strstrt(c, "-") > 0) ? c[1:strstrt(c, "-") - 1] : c
colour(c) = pol(c) eq "raw" ? "black" : pol(c) eq "everywhere" ? "#2ca02c" : pol(c) eq "global" ? "#1f77b4" : \
            pol(c) eq "vci" ? "#d62728" : pol(c) eq "thread" ? "#8c564b" : pol(c) eq "combine" ? "#9467bd" : \
            pol(c) eq "offload" ? "#e377c2" : pol(c) eq "serial" ? "#7f7f7f" : pol(c) eq "tag" ? "#ff7f0e" : "#bcbd22"
dash(c) = (strstrt(c, "-spin") > 0) ? 1 : (strstrt(c, "-block") > 0) ? 2 : (strstrt(c, "-adaptive") > 0) ? 4 : 1
width(c) = (c eq "raw" || c eq "everywhere") ? 3 : 1.5
plot for [i = 1:words(cols)] datafile using 1:(column(i + 1)) title word(cols, i) \
     lw width(word(cols, i)) lc rgb colour(word(cols, i)) dt dash(word(cols, i)) pt (4 + i)
