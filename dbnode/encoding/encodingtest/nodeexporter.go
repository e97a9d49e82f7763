// Package encodingtest generates realistic series for encoding tests and
// benchmarks, so that the encoding package and its users (filesets, storage)
// measure compression on the same data.
package encodingtest

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"sort"

	"github.com/prometheus/prometheus/model/labels"

	"github.com/tessera-tsdb/tessera/ident"
)

// pageSize is the disk page and file-system block size the fake
// node_exporter's disk and file-system counters are made of.
const pageSize = 4096

// Series is one generated series.
type Series struct {
	ID     []byte        // ident.FromLabels(Labels)
	Labels labels.Labels //
	Kind   string        // the value shape, for per-kind size reports
	T      []int64
	V      []float64
}

// NodeExporterConfig sizes the data set.
type NodeExporterConfig struct {
	Hosts    int    // scrape targets
	Samples  int    // samples per series (720 = 2 hours at 10 s)
	Seed     uint64 // fixed seed: same config, same data
	Start    int64  // ms; scrape offsets of hosts are added to it
	Interval int64  // ms between scrapes
}

// DefaultNodeExporter is the data set the encoding benchmarks report on:
// 20 hosts, 2 hours at 10 s.
var DefaultNodeExporter = NodeExporterConfig{
	Hosts: 20, Samples: 720, Seed: 42,
	Start: 1_700_002_800_000, Interval: 10_000,
}

// NodeExporter generates what Prometheus would have scraped from
// node_exporter on cfg.Hosts machines, sorted by series ID as a fileset
// stores them. Per host about 110 series: cpu seconds per cpu and mode
// (centisecond counters), memory and filesystem byte gauges (kB and block
// multiples), network and disk counters, load averages (2 decimals),
// temperatures, small integer gauges, a few constants (up, boot time, sizes)
// and a few arbitrary floats (scrape durations, node_time_seconds). Over half
// of the series change at nine scrapes in ten or more; one in eight never
// changes. All series of a host share its scrape timestamps: 10 s apart,
// with one scrape in ten off its schedule by 1-5 ms.
func NodeExporter(cfg NodeExporterConfig) []Series {
	var out []Series
	NodeExporterHosts(cfg, func(_ int, series []Series) { out = append(out, series...) })
	sort.Slice(out, func(i, j int) bool { return bytes.Compare(out[i].ID, out[j].ID) < 0 })
	return out
}

// NodeExporterHosts generates the same data as NodeExporter one host at a
// time, handing fn each host's series (in generation order, not sorted)
// before generating the next, so that a data set too large to hold at
// once (100,000 series and more) can be streamed into storage.
func NodeExporterHosts(cfg NodeExporterConfig, fn func(host int, series []Series)) {
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x7e55e7a))
	for h := 0; h < cfg.Hosts; h++ {
		fn(h, newHost(rng, cfg, h).run())
	}
}

// host simulates one machine; every series reads its shared state.
type host struct {
	rng      *rand.Rand
	cfg      NodeExporterConfig
	instance string
	cpus     int
	baseLoad float64
	load     float64 // current busy fraction 0..1
	series   []*genSeries
}

type genSeries struct {
	kind string
	ls   labels.Labels
	next func() float64
}

func newHost(rng *rand.Rand, cfg NodeExporterConfig, idx int) *host {
	h := &host{
		rng:      rng,
		cfg:      cfg,
		instance: fmt.Sprintf("10.0.%d.%d:9100", idx/250, idx%250+1),
		cpus:     []int{2, 4, 4, 8}[rng.IntN(4)],
		baseLoad: 0.05 + 0.5*rng.Float64(),
	}
	h.load = h.baseLoad
	h.addSystem()
	h.addCPU()
	h.addMemory()
	h.addNetwork()
	h.addDisk()
	h.addFilesystem()
	h.addMisc()
	return h
}

func (h *host) add(kind string, next func() float64, kv ...string) {
	kv = append(kv, "instance", h.instance, "job", "node")
	h.series = append(h.series, &genSeries{kind: kind, ls: labels.FromStrings(kv...), next: next})
}

// run produces the samples of all of the host's series.
func (h *host) run() []Series {
	out := make([]Series, len(h.series))
	for i, s := range h.series {
		out[i] = Series{ID: ident.FromLabels(s.ls), Labels: s.ls, Kind: s.kind,
			T: make([]int64, h.cfg.Samples), V: make([]float64, h.cfg.Samples)}
	}
	offset := h.rng.Int64N(h.cfg.Interval)
	for k := 0; k < h.cfg.Samples; k++ {
		t := h.cfg.Start + offset + int64(k)*h.cfg.Interval
		if h.rng.IntN(10) == 0 {
			j := 1 + h.rng.Int64N(5)
			if h.rng.IntN(2) == 0 {
				j = -j
			}
			t += j
		}
		// Busy fraction: mean reverting walk around the host's base.
		h.load = clamp(h.load+0.1*(h.baseLoad-h.load)+h.norm(0, 0.03), 0.01, 0.98)
		for i, s := range h.series {
			out[i].T[k] = t
			out[i].V[k] = s.next()
		}
	}
	return out
}

func (h *host) norm(mean, sd float64) float64 { return mean + sd*h.rng.NormFloat64() }

// poisson draws a Poisson count (normal approximation above 30).
func (h *host) poisson(mean float64) int64 {
	if mean <= 0 {
		return 0
	}
	if mean > 30 {
		return max(0, int64(math.Round(h.norm(mean, math.Sqrt(mean)))))
	}
	l, k, p := math.Exp(-mean), int64(0), 1.0
	for {
		p *= h.rng.Float64()
		if p <= l {
			return k
		}
		k++
	}
}

func clamp(x, lo, hi float64) float64 { return math.Max(lo, math.Min(hi, x)) }

// constant returns a series that never changes.
func constant(v float64) func() float64 { return func() float64 { return v } }

// counter accumulates integer increments and reports total*unit/div: unit for
// sectors or pages, div for centiseconds or milliseconds (a decimal, as
// node_exporter computes it).
func counter(start int64, unit int64, div float64, inc func() int64) func() float64 {
	total := start
	return func() float64 {
		total += inc()
		if div == 1 {
			return float64(total * unit)
		}
		return float64(total*unit) / div
	}
}

// gauge is a mean reverting random walk in whole units, reported as
// units*unit (kB pages, filesystem blocks). It moves at a scrape with
// probability p.
func (h *host) gauge(mean, sd, p float64, unit int64) func() float64 {
	x := math.Round(h.norm(mean, 3*sd))
	return func() float64 {
		if h.rng.Float64() < p {
			x = math.Max(0, math.Round(x+0.05*(mean-x)+h.norm(0, sd)))
		}
		return float64(int64(x) * unit)
	}
}

func (h *host) addSystem() {
	boot := float64(h.cfg.Start/1000 - 86400 - h.rng.Int64N(90*86400))
	h.add("constant", constant(1), "__name__", "up")
	h.add("constant", constant(boot), "__name__", "node_boot_time_seconds")
	h.add("constant", constant(1), "__name__", "node_uname_info", "machine", "x86_64", "release", "6.8.0-45-generic")
	h.add("gauge_int", h.gauge(3500, 40, 1, 1), "__name__", "node_entropy_available_bits")
	h.add("constant", constant(float64(150+h.rng.IntN(50))), "__name__", "scrape_samples_scraped")
	// Arbitrary floats: durations and clocks in seconds with nanosecond
	// digits, the shape integer mode cannot help with.
	k := 0
	h.add("float", func() float64 {
		k++
		ns := (h.cfg.Start+int64(k)*h.cfg.Interval)*1e6 + h.rng.Int64N(1e9)
		return float64(ns) / 1e9
	}, "__name__", "node_time_seconds")
	for _, c := range []string{"cpu", "diskstats"} {
		h.add("float", func() float64 { return (2e6 + h.rng.ExpFloat64()*1e6) / 1e9 },
			"__name__", "node_scrape_collector_duration_seconds", "collector", c)
	}
	h.add("float", func() float64 { return durationSeconds(h.rng.ExpFloat64()*5e6 + 2e7) }, "__name__", "scrape_duration_seconds")
}

// durationSeconds converts nanoseconds to seconds the way time.Duration.Seconds does.
func durationSeconds(ns float64) float64 {
	n := int64(ns)
	return float64(n/1e9) + float64(n%1e9)/1e9
}

func (h *host) addCPU() {
	type cpuState struct{ user, system, softirq, iowait, nice, idle int64 }
	uptimeTicks := int64(1e7 + h.rng.Float64()*5e8)
	for c := 0; c < h.cpus; c++ {
		cpu := fmt.Sprint(c)
		var inc cpuState
		step := func() {
			busy := clamp(h.norm(h.load, 0.05), 0, 1) * 1000
			inc.user = max(0, int64(math.Round(h.norm(busy*0.7, 5))))
			inc.system = max(0, int64(math.Round(h.norm(busy*0.25, 3))))
			inc.softirq = max(0, int64(math.Round(h.norm(busy*0.03, 1.5))))
			inc.iowait = h.poisson(1.5)
			inc.nice = 0
			if h.rng.IntN(50) == 0 {
				inc.nice = 1 + h.rng.Int64N(5)
			}
			used := inc.user + inc.system + inc.softirq + inc.iowait + inc.nice
			// Accounting noise: ticks are not exactly 1000 per 10 s.
			inc.idle = max(0, 1000-used+int64(math.Round(h.norm(0, 2))))
		}
		field := func(f func() int64, frac float64) func() float64 {
			return counter(int64(float64(uptimeTicks)*frac), 1, 100, f)
		}
		// The idle series steps the per-cpu state; the others read it.
		// Labels sort "idle" first, but generation order is ours.
		h.add("cpu_seconds", field(func() int64 { step(); return inc.idle }, 0.7), "__name__", "node_cpu_seconds_total", "cpu", cpu, "mode", "idle")
		h.add("cpu_seconds", field(func() int64 { return inc.user }, 0.2), "__name__", "node_cpu_seconds_total", "cpu", cpu, "mode", "user")
		h.add("cpu_seconds", field(func() int64 { return inc.system }, 0.07), "__name__", "node_cpu_seconds_total", "cpu", cpu, "mode", "system")
		h.add("cpu_seconds", field(func() int64 { return inc.softirq }, 0.01), "__name__", "node_cpu_seconds_total", "cpu", cpu, "mode", "softirq")
		h.add("cpu_seconds", field(func() int64 { return inc.iowait }, 0.01), "__name__", "node_cpu_seconds_total", "cpu", cpu, "mode", "iowait")
		h.add("cpu_seconds", field(func() int64 { return inc.nice }, 0.001), "__name__", "node_cpu_seconds_total", "cpu", cpu, "mode", "nice")
		h.add("cpu_seconds", field(func() int64 { return h.poisson(0.2) }, 0.0005), "__name__", "node_cpu_seconds_total", "cpu", cpu, "mode", "irq")
		h.add("constant", constant(0), "__name__", "node_cpu_seconds_total", "cpu", cpu, "mode", "steal")
	}
	// Load averages: kernel-style exponential averages of runnable tasks,
	// printed with two decimals and parsed back.
	var l1, l5, l15 = h.baseLoad * float64(h.cpus), h.baseLoad * float64(h.cpus), h.baseLoad * float64(h.cpus)
	h.add("load", func() float64 {
		run := float64(h.poisson(h.load * float64(h.cpus)))
		l1 = l1*0.846 + run*0.154
		l5 = l5*0.967 + run*0.033
		l15 = l15*0.989 + run*0.011
		return math.Round(l1*100) / 100
	}, "__name__", "node_load1")
	h.add("load", func() float64 { return math.Round(l5*100) / 100 }, "__name__", "node_load5")
	h.add("load", func() float64 { return math.Round(l15*100) / 100 }, "__name__", "node_load15")
}

func (h *host) addMemory() {
	totalKB := int64(h.cpus) * 4 * 1024 * 1024
	mem := func(name string, next func() float64) {
		h.add("mem_bytes", next, "__name__", "node_memory_"+name+"_bytes")
	}
	h.add("constant", constant(float64(totalKB*1024)), "__name__", "node_memory_MemTotal_bytes")
	h.add("constant", constant(float64(totalKB/4*1024)), "__name__", "node_memory_SwapTotal_bytes")
	t := float64(totalKB)
	// name, mean (kB), sd per scrape (in 4 kB pages), move probability
	for _, g := range []struct {
		name     string
		mean, sd float64
		p        float64
		unit     int64
	}{
		{"MemFree", 0.3 * t, 400, 1, 4},
		{"MemAvailable", 0.6 * t, 350, 1, 4},
		{"Buffers", 0.02 * t, 8, 0.8, 4},
		{"Cached", 0.3 * t, 80, 1, 4},
		{"Active", 0.35 * t, 150, 1, 4},
		{"Inactive", 0.25 * t, 100, 1, 4},
		{"Active_anon", 0.2 * t, 120, 1, 4},
		{"Inactive_anon", 0.05 * t, 30, 1, 4},
		{"Active_file", 0.15 * t, 60, 1, 4},
		{"Inactive_file", 0.2 * t, 70, 1, 4},
		{"AnonPages", 0.25 * t, 150, 1, 4},
		{"Mapped", 0.03 * t, 15, 0.9, 4},
		{"Shmem", 0.01 * t, 4, 0.3, 4},
		{"Slab", 0.03 * t, 20, 1, 4},
		{"SReclaimable", 0.02 * t, 15, 1, 4},
		{"SUnreclaim", 0.01 * t, 8, 1, 4},
		{"KernelStack", 4000, 2, 0.5, 16},
		{"PageTables", 0.005 * t, 6, 0.9, 4},
		{"Committed_AS", 0.5 * t, 250, 1, 4},
		{"Dirty", 600, 60, 1, 4},
		{"Writeback", 0, 1, 0.05, 4},
	} {
		mem(g.name, h.gauge(g.mean/float64(g.unit), g.sd, g.p, g.unit*1024))
	}
}

func (h *host) addNetwork() {
	for _, dev := range []struct {
		name string
		pkts float64 // mean packets per scrape at base load
	}{{"eth0", 300 + h.rng.Float64()*20000}, {"lo", 50 + h.rng.Float64()*2000}} {
		for _, dir := range []string{"receive", "transmit"} {
			var pkts int64
			rate := dev.pkts
			if dir == "transmit" {
				rate *= 0.8
			}
			h.add("net_packets", counter(h.rng.Int64N(1e10), 1, 1, func() int64 {
				pkts = h.poisson(rate * (0.5 + h.load))
				return pkts
			}), "__name__", "node_network_"+dir+"_packets_total", "device", dev.name)
			h.add("net_bytes", counter(h.rng.Int64N(1e13), 1, 1, func() int64 {
				// Packet sizes mix small acks and full frames.
				return pkts * (66 + h.rng.Int64N(1400))
			}), "__name__", "node_network_"+dir+"_bytes_total", "device", dev.name)
			if dev.name == "eth0" {
				h.add("constant", constant(0), "__name__", "node_network_"+dir+"_errs_total", "device", dev.name)
			}
		}
	}
}

func (h *host) addDisk() {
	dev := []string{"sda", "nvme0n1"}[h.rng.IntN(2)]
	var writes, reads int64
	writeRate := 20 + h.rng.Float64()*400
	disk := func(kind, name string, next func() float64) {
		h.add(kind, next, "__name__", "node_disk_"+name, "device", dev)
	}
	disk("disk_ops", "writes_completed_total", counter(h.rng.Int64N(1e9), 1, 1, func() int64 {
		writes = h.poisson(writeRate * (0.5 + h.load))
		return writes
	}))
	disk("disk_bytes", "written_bytes_total", counter(h.rng.Int64N(1e10), 512, 1, func() int64 {
		return writes * (8 + h.rng.Int64N(56)) // sectors
	}))
	disk("disk_ops", "reads_completed_total", counter(h.rng.Int64N(1e8), 1, 1, func() int64 {
		reads = 0
		if h.rng.IntN(8) == 0 {
			reads = 1 + h.poisson(20)
		}
		return reads
	}))
	disk("disk_bytes", "read_bytes_total", counter(h.rng.Int64N(1e9), pageSize, 1, func() int64 {
		return reads * (1 + h.rng.Int64N(32)) // pages
	}))
	disk("disk_seconds", "io_time_seconds_total", counter(h.rng.Int64N(1e9), 1, 1000, func() int64 {
		return h.poisson(float64(writes+reads) * 0.8) // ms
	}))
	disk("disk_seconds", "write_time_seconds_total", counter(h.rng.Int64N(1e9), 1, 1000, func() int64 {
		return h.poisson(float64(writes) * 1.2)
	}))
	disk("disk_seconds", "read_time_seconds_total", counter(h.rng.Int64N(1e8), 1, 1000, func() int64 {
		return h.poisson(float64(reads) * 0.5)
	}))
}

func (h *host) addFilesystem() {
	for _, fs := range []struct {
		mount     string
		sizeGB    int64
		churn     float64 // blocks per scrape
		filesMove float64
	}{{"/", 100, 30, 0.9}, {"/var/lib/docker", 200, 8, 0.6}} {
		size := fs.sizeGB << 30
		blocks := float64(size / pageSize)
		lbl := []string{"device", "/dev/sda1", "fstype", "ext4", "mountpoint", fs.mount}
		add := func(kind, name string, next func() float64) {
			h.add(kind, next, append([]string{"__name__", "node_filesystem_" + name}, lbl...)...)
		}
		add("constant", "size_bytes", constant(float64(size)))
		free := math.Round(blocks * (0.2 + 0.6*h.rng.Float64()))
		reserved := math.Round(blocks * 0.05)
		step := func() float64 {
			// Logs grow; now and then something is deleted.
			d := -float64(h.poisson(fs.churn))
			if h.rng.IntN(200) == 0 {
				d += float64(h.rng.IntN(100000))
			}
			free = math.Max(0, free+d)
			return free
		}
		add("fs_bytes", "free_bytes", func() float64 { return step() * pageSize })
		add("fs_bytes", "avail_bytes", func() float64 { return (free - reserved) * pageSize })
		add("gauge_int", "files_free", h.gauge(float64(size/16384)*0.9, 3, fs.filesMove, 1))
	}
}

func (h *host) addMisc() {
	c := float64(h.cpus)
	inc := func(kind, name string, start int64, rate func() float64) {
		h.add(kind, counter(start, 1, 1, func() int64 { return h.poisson(rate()) }), "__name__", name)
	}
	inc("counter", "node_context_switches_total", h.rng.Int64N(1e11), func() float64 { return 5000 * c * (0.2 + h.load) })
	inc("counter", "node_intr_total", h.rng.Int64N(1e11), func() float64 { return 4000 * c * (0.3 + h.load) })
	inc("counter", "node_forks_total", h.rng.Int64N(1e8), func() float64 { return 20 * (0.5 + h.load) })
	inc("counter", "node_netstat_Tcp_ActiveOpens", h.rng.Int64N(1e7), func() float64 { return 5 })
	inc("counter", "node_netstat_Tcp_PassiveOpens", h.rng.Int64N(1e7), func() float64 { return 12 * (0.5 + h.load) })
	inc("counter", "node_netstat_Tcp_InSegs", h.rng.Int64N(1e10), func() float64 { return 2000 * (0.5 + h.load) })
	inc("counter", "node_netstat_Tcp_OutSegs", h.rng.Int64N(1e10), func() float64 { return 1800 * (0.5 + h.load) })
	inc("counter", "node_netstat_Udp_InDatagrams", h.rng.Int64N(1e8), func() float64 { return 30 })
	inc("counter", "node_netstat_Tcp_RetransSegs", h.rng.Int64N(1e5), func() float64 { return 0.3 })
	h.add("gauge_int", func() float64 { return float64(1 + h.poisson(h.load*c)) }, "__name__", "node_procs_running")
	h.add("gauge_int", func() float64 { return float64(h.poisson(0.05)) }, "__name__", "node_procs_blocked")
	h.add("gauge_int", h.gauge(50, 2, 0.9, 1), "__name__", "node_sockstat_TCP_inuse")
	h.add("gauge_int", h.gauge(400, 3, 1, 1), "__name__", "node_sockstat_sockets_used")
	h.add("gauge_int", h.gauge(3000, 5, 1, 1), "__name__", "node_filefd_allocated")
	h.add("gauge_int", h.gauge(40, 2, 0.9, 1), "__name__", "node_netstat_Tcp_CurrEstab")
	// Temperatures: coretemp and nvme in whole degrees, the thermal zone in
	// millidegrees; node_exporter divides millidegrees by 1000.
	temp := func(kind string, mean, sd, p float64, div float64, kv ...string) {
		x := mean * div
		h.add(kind, func() float64 {
			if h.rng.Float64() < p {
				x = math.Round(x + 0.1*(mean*div-x) + h.norm(0, sd*div))
			}
			return x / div
		}, kv...)
	}
	for s := 1; s <= h.cpus/2+1; s++ {
		temp("temp", 45+10*h.baseLoad, 1, 0.4, 1, "__name__", "node_hwmon_temp_celsius", "chip", "platform_coretemp_0", "sensor", fmt.Sprintf("temp%d", s))
	}
	temp("temp", 38, 0.5, 0.2, 1, "__name__", "node_hwmon_temp_celsius", "chip", "nvme_nvme0", "sensor", "temp1")
	temp("temp", 42, 0.3, 0.8, 1000, "__name__", "node_thermal_zone_temp", "type", "x86_pkg_temp", "zone", "0")
}
