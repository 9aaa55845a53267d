package crontab

import (
	"strings"
	"testing"

	"github.com/schedulerd/schedulerd/config"
)

func TestJobName(t *testing.T) {
	for _, tc := range []struct{ cmd, name string }{
		{"/usr/local/bin/backup --full", "backup"},
		{"$HOME/bin/daily.job >> $HOME/tmp/out 2>&1", "daily.job"},
		{"cd / && run-parts --report /etc/cron.hourly", "run-parts-cron.hourly"},
		{"test -x /usr/sbin/anacron || { cd / && run-parts --report /etc/cron.daily; }", "run-parts-cron.daily"},
		{"[ -x /usr/lib/php/sessionclean ] && if [ ! -d /run/systemd/system ]; then /usr/lib/php/sessionclean; fi", "sessionclean"},
		{"command -v debian-sa1 > /dev/null && debian-sa1 1 1", "debian-sa1"},
		{"test $(date +%u) -eq 6 && echo \"2nd Saturday\"", "echo"},
		{"test `date +%u` -eq 6 && echo x", "echo"},
		{"SERVICE_MODE=1 /sbin/e2scrub_all -A -r", "e2scrub_all"},
		{"exec nice -n 10 ionice -c3 /usr/bin/python3 /srv/app/manage.py cleanup", "python3-manage.py"},
		{"php /var/www/artisan schedule:run", "php-artisan"},
		{"perl -e 'sleep int(rand(43200))' && certbot -q renew", "perl"},
		{"timeout 10m flock -n /run/x.lock /opt/sync.sh", "sync.sh"},
		{"'/opt/my tool/run it' now", "run-it"},
		{"sleep 30; /usr/bin/true", "true"},
		{"cd /tmp", "cd"},
		{"echo ü€", "echo"},
		{"/opt/ünïcode", "n-code"},
		{"/opt/" + strings.Repeat("x", 100), strings.Repeat("x", 60)},
		{"/opt/...", "job"},
		{"   ", "job"},
	} {
		if got := jobName(tc.cmd); got != tc.name || !config.ValidJobName(got) {
			t.Errorf("jobName(%q) = %q, want %q", tc.cmd, got, tc.name)
		}
	}
}
