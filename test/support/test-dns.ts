/**
 * A DNS server for egress tests on 127.0.0.1 (UDP): answers A and AAAA queries from a table the test
 * gives (name → addresses), NXDOMAIN otherwise, and records every name it was asked — so a test can
 * prove which names the proxy resolved. Encoding and decoding by dns-packet.
 */
import { createSocket, type Socket } from 'node:dgram';
import { isIP } from 'node:net';
import * as packet from 'dns-packet';

export interface TestDns {
  /** "127.0.0.1:port", for egressTestHooks({ dnsServers }). */
  server: string;
  /** Every name asked, in order (one per question; A and AAAA both count). */
  asked: string[];
  close(): Promise<void>;
}

export async function startTestDns(answer: (name: string) => string[] | undefined): Promise<TestDns> {
  const asked: string[] = [];
  const sock: Socket = createSocket('udp4');
  sock.on('message', (msg, rinfo) => {
    let q: packet.Packet;
    try {
      q = packet.decode(msg);
    } catch {
      return;
    }
    const question = q.questions?.[0];
    if (!question) return;
    const name = question.name.toLowerCase();
    asked.push(name);
    const addrs = answer(name);
    const fam = question.type === 'A' ? 4 : question.type === 'AAAA' ? 6 : 0;
    const answers = (addrs ?? []).filter((a) => isIP(a) === fam).map((data) => ({ type: question.type as 'A' | 'AAAA', name: question.name, ttl: 1, class: 'IN' as const, data }));
    const res = packet.encode({ id: q.id, type: 'response', flags: packet.RECURSION_DESIRED | packet.RECURSION_AVAILABLE | (addrs ? 0 : 3), questions: q.questions, answers });
    sock.send(res, rinfo.port, rinfo.address);
  });
  await new Promise<void>((r) => sock.bind(0, '127.0.0.1', r));
  return {
    server: `127.0.0.1:${sock.address().port}`,
    asked,
    close: () => new Promise((r) => sock.close(() => r())),
  };
}
